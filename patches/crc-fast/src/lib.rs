//! The subset of [crc-fast](https://crates.io/crates/crc-fast) 1.10 that `aws-smithy-checksums`
//! (the S3 client's flexible checksums) calls: `checksum`, `Digest::{new, update, finalize}`
//! for CRC-32 (ISO-HDLC), CRC-32C (iSCSI) and CRC-64/NVME. crc-fast dispatches on a runtime
//! algorithm value across 60 CRC variants, so every function that links the S3 client carried
//! all of their tables and SIMD kernels (0.7 MB of the binary); these three are table-driven
//! (slicing-by-8, 24 KB of tables built at compile time), a few GB/s when optimised, which is
//! far beyond what a Lambda uploads. The workspace patches crates.io's crate with this one.

/// The algorithms the S3 client asks for. Variant names are crc-fast's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrcAlgorithm {
    Crc32IsoHdlc,
    Crc32Iscsi,
    Crc64Nvme,
}

/// A reflected CRC of width 32 or 64, held in a u64 register (CRC catalogue parameters).
struct Params {
    /// The reflected polynomial.
    poly: u64,
    init: u64,
    xorout: u64,
}

const CRC32: Params = Params { poly: 0xEDB8_8320, init: 0xFFFF_FFFF, xorout: 0xFFFF_FFFF };
const CRC32C: Params = Params { poly: 0x82F6_3B78, init: 0xFFFF_FFFF, xorout: 0xFFFF_FFFF };
const CRC64_NVME: Params = Params { poly: 0x9A6C_9329_AC4B_C9B5, init: u64::MAX, xorout: u64::MAX };

type Tables = [[u64; 256]; 8];

/// Slicing-by-8 tables: `t[0]` is the byte-at-a-time table, `t[k][i]` is `t[k-1][i]` advanced
/// by one more zero byte.
const fn tables(poly: u64) -> Tables {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ poly } else { crc >> 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static CRC32_TABLES: Tables = tables(CRC32.poly);
static CRC32C_TABLES: Tables = tables(CRC32C.poly);
static CRC64_NVME_TABLES: Tables = tables(CRC64_NVME.poly);

fn parts(algorithm: CrcAlgorithm) -> (&'static Params, &'static Tables) {
    match algorithm {
        CrcAlgorithm::Crc32IsoHdlc => (&CRC32, &CRC32_TABLES),
        CrcAlgorithm::Crc32Iscsi => (&CRC32C, &CRC32C_TABLES),
        CrcAlgorithm::Crc64Nvme => (&CRC64_NVME, &CRC64_NVME_TABLES),
    }
}

/// Advances a reflected register over `data`. For a 32-bit CRC the register's upper half
/// stays zero, so one formula serves both widths: the register only meets the first four
/// bytes of each eight.
fn update(mut crc: u64, t: &Tables, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let x = crc ^ u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        crc = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// A running CRC, as crc-fast's `Digest`.
#[derive(Clone, Copy, Debug)]
pub struct Digest {
    algorithm: CrcAlgorithm,
    state: u64,
    amount: u64,
}

impl Digest {
    pub fn new(algorithm: CrcAlgorithm) -> Self {
        Self { algorithm, state: parts(algorithm).0.init, amount: 0 }
    }

    pub fn update(&mut self, data: &[u8]) {
        self.state = update(self.state, parts(self.algorithm).1, data);
        self.amount += data.len() as u64;
    }

    pub fn finalize(&self) -> u64 {
        self.state ^ parts(self.algorithm).0.xorout
    }

    pub fn finalize_reset(&mut self) -> u64 {
        let out = self.finalize();
        self.reset();
        out
    }

    pub fn reset(&mut self) {
        *self = Self::new(self.algorithm);
    }

    /// Bytes consumed so far.
    pub fn get_amount(&self) -> u64 {
        self.amount
    }
}

/// The CRC of `buf` in one call.
pub fn checksum(algorithm: CrcAlgorithm, buf: &[u8]) -> u64 {
    let mut d = Digest::new(algorithm);
    d.update(buf);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC catalogue's check values (the CRC of "123456789").
    #[test]
    fn catalogue_check_values() {
        assert_eq!(checksum(CrcAlgorithm::Crc32IsoHdlc, b"123456789"), 0xCBF4_3926);
        assert_eq!(checksum(CrcAlgorithm::Crc32Iscsi, b"123456789"), 0xE306_9283);
        assert_eq!(checksum(CrcAlgorithm::Crc64Nvme, b"123456789"), 0xAE8B_1486_0A79_9888);
        assert_eq!(checksum(CrcAlgorithm::Crc32IsoHdlc, b""), 0);
    }

    /// Eight-byte blocks and the byte-at-a-time tail agree, however the input is split.
    #[test]
    fn any_split_gives_the_one_shot_value() {
        let data: Vec<u8> = (0..1031u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for alg in [CrcAlgorithm::Crc32IsoHdlc, CrcAlgorithm::Crc32Iscsi, CrcAlgorithm::Crc64Nvme] {
            // The bitwise definition, one bit at a time.
            let (p, _) = parts(alg);
            let mut bitwise = p.init;
            for &b in &data {
                bitwise ^= b as u64;
                for _ in 0..8 {
                    bitwise = if bitwise & 1 == 1 { (bitwise >> 1) ^ p.poly } else { bitwise >> 1 };
                }
            }
            let want = bitwise ^ p.xorout;
            assert_eq!(checksum(alg, &data), want, "{alg:?}");
            for cut in [0, 1, 7, 8, 9, 500, 1030, 1031] {
                let mut d = Digest::new(alg);
                d.update(&data[..cut]);
                d.update(&data[cut..]);
                assert_eq!((d.finalize(), d.get_amount()), (want, 1031), "{alg:?} split at {cut}");
            }
            let mut d = Digest::new(alg);
            d.update(&data);
            assert_eq!(d.finalize_reset(), want);
            assert_eq!(d.finalize(), checksum(alg, b""), "reset");
        }
    }
}
