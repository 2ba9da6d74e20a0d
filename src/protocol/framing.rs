//! Reading one `\n`-terminated line with a hard size cap, before anything is parsed.

use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("request line exceeds {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("a request line was started but not finished within {0:?}")]
    Stalled(Duration),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads the next line (without its `\n`; a trailing `\r` is dropped too). `Ok(None)` at a clean
/// end of stream. A final line without `\n` is returned as a line. Waiting for a line to start
/// has no bound here; once its first byte has arrived, the rest must follow within
/// `line_timeout` (a client that sends half a line and stalls is cut off).
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: u64,
    line_timeout: Duration,
) -> Result<Option<Vec<u8>>, FrameError> {
    let mut line = Vec::new();
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let available = match deadline {
            None => reader.fill_buf().await?,
            Some(at) => match tokio::time::timeout_at(at, reader.fill_buf()).await {
                Ok(read) => read?,
                Err(_) => return Err(FrameError::Stalled(line_timeout)),
            },
        };
        deadline.get_or_insert_with(|| tokio::time::Instant::now() + line_timeout);
        if available.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if (line.len() + take) as u64 > limit + 1 {
            return Err(FrameError::TooLarge { limit });
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn lines_and_caps() {
        let data: &[u8] = b"one\ntwo\r\n\nlast";
        let mut r = tokio::io::BufReader::new(data);
        assert_eq!(read_frame(&mut r, 100, T).await.unwrap().unwrap(), b"one");
        assert_eq!(read_frame(&mut r, 100, T).await.unwrap().unwrap(), b"two");
        assert_eq!(read_frame(&mut r, 100, T).await.unwrap().unwrap(), b"");
        assert_eq!(read_frame(&mut r, 100, T).await.unwrap().unwrap(), b"last");
        assert!(read_frame(&mut r, 100, T).await.unwrap().is_none());

        let big = vec![b'x'; 50];
        let mut r = tokio::io::BufReader::with_capacity(8, big.as_slice());
        assert!(matches!(
            read_frame(&mut r, 10, T).await,
            Err(FrameError::TooLarge { limit: 10 })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_line_times_out() {
        let (mut client, server) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"{\"jsonrpc\"")
            .await
            .unwrap();
        let mut r = tokio::io::BufReader::new(server);
        assert!(matches!(
            read_frame(&mut r, 100, T).await,
            Err(FrameError::Stalled(_))
        ));
    }
}
