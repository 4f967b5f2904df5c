//! Lists every scheduled post, page after page.
//!
//! `PLATFORM_BASE_URL=http://127.0.0.1:3000/api/v1 PLATFORM_API_KEY=wsp_... cargo run -p workspace-platform-client --example list_posts`

use futures_util::StreamExt;
use workspace_platform_client::{Client, ListPostsQuery, PostStatus};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::with_api_key(&std::env::var("PLATFORM_BASE_URL")?, &std::env::var("PLATFORM_API_KEY")?)?;
    let query = ListPostsQuery { status: Some(PostStatus::Scheduled), ..Default::default() };
    let posts = client.list_posts_all(&query);
    futures_util::pin_mut!(posts);
    while let Some(post) = posts.next().await {
        let post = post?;
        println!("{} {:?} {}", post.id, post.scheduled_at, post.content);
    }
    Ok(())
}
