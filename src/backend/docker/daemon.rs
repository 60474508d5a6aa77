//! Finding the Docker engine: its endpoint, a sync `GET /_ping` (to pick the
//! backend before any runtime exists) and the async connection.

use std::time::Duration;

use bollard::Docker;

use super::DockerError;

/// Limit on finding out whether a daemon answers.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

fn endpoint() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

/// Whether a daemon answers `GET /_ping` at DOCKER_HOST or the local
/// socket, within a couple of seconds. Sync: used to pick the backend.
pub fn answers() -> Result<(), DockerError> {
    ping(&endpoint())
}

/// `GET /_ping` at a `unix://` or `tcp://` endpoint.
fn ping(ep: &str) -> Result<(), DockerError> {
    let unreachable = |reason: String| DockerError::Unreachable {
        endpoint: ep.to_string(),
        reason,
    };
    let limit = Some(Duration::from_secs(3));
    let request = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n";
    let mut reply = Vec::new();
    if let Some(path) = ep.strip_prefix("unix://") {
        let s = std::os::unix::net::UnixStream::connect(path)
            .map_err(|e| unreachable(e.to_string()))?;
        s.set_read_timeout(limit)
            .and_then(|_| s.set_write_timeout(limit))
            .and_then(|_| exchange(s, request, &mut reply))
            .map_err(|e| unreachable(e.to_string()))?;
    } else if let Some(addr) = ep.strip_prefix("tcp://") {
        let addr = addr.trim_end_matches('/');
        let sock = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| unreachable(e.to_string()))?
            .next()
            .ok_or_else(|| unreachable("no address".into()))?;
        let s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(3))
            .map_err(|e| unreachable(e.to_string()))?;
        s.set_read_timeout(limit)
            .and_then(|_| s.set_write_timeout(limit))
            .and_then(|_| exchange(s, request, &mut reply))
            .map_err(|e| unreachable(e.to_string()))?;
    } else {
        // ssh:// and the like: let the client find out.
        return Ok(());
    }
    let head = String::from_utf8_lossy(&reply[..reply.len().min(64)]).into_owned();
    if head.starts_with("HTTP/1.") && head.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(unreachable(format!(
            "unexpected answer to /_ping: {:?}",
            head.lines().next().unwrap_or("")
        )))
    }
}

/// Send a request on a connected stream and read the whole reply.
fn exchange(
    mut s: impl std::io::Read + std::io::Write,
    request: &[u8],
    reply: &mut Vec<u8>,
) -> std::io::Result<()> {
    s.write_all(request)?;
    s.read_to_end(reply).map(|_| ())
}

/// Connect to the engine (DOCKER_HOST or the local socket) and check that it
/// answers, with the API version both sides speak.
pub async fn connect() -> Result<Docker, DockerError> {
    let unreachable = |reason: String| DockerError::Unreachable {
        endpoint: endpoint(),
        reason,
    };
    let docker = Docker::connect_with_defaults().map_err(|e| unreachable(e.to_string()))?;
    let docker = match tokio::time::timeout(PING_TIMEOUT, docker.negotiate_version()).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) => {
            return Err(unreachable(format!(
                "no answer within {}s",
                PING_TIMEOUT.as_secs()
            )))
        }
    };
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!(
            "no answer within {}s",
            PING_TIMEOUT.as_secs()
        ))),
    }
}

/// Wait until the engine answers `/_ping` again, polling, at most `limit`;
/// true when it does.
pub async fn wait_answers(limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut said = false;
    loop {
        match tokio::task::spawn_blocking(answers).await {
            Ok(Ok(())) => return true,
            Ok(Err(e)) if !said => {
                tracing::warn!("waiting up to {}s for the engine: {e}", limit.as_secs());
                said = true;
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_needs_a_200_from_the_socket() {
        use std::io::{Read, Write};
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("d.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
                "HTTP/1.1 500 Internal Server Error\r\n\r\n",
            ] {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf).unwrap();
                c.write_all(answer.as_bytes()).unwrap();
            }
        });
        let ep = format!("unix://{}", sock.display());
        ping(&ep).unwrap();
        let e = ping(&ep).unwrap_err().to_string();
        assert!(e.contains("500") && e.contains("d.sock"), "{e}");
        server.join().unwrap();
        let e = ping(&format!("unix://{}", d.path().join("none.sock").display())).unwrap_err();
        assert!(matches!(e, DockerError::Unreachable { .. }), "{e}");
    }
}
