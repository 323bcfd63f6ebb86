//! The WebSockets open per client address, capped (`HONCHO_MAX_WEBSOCKETS_PER_ADDRESS`): a socket
//! holds a file descriptor and a task for as long as it lives, so one client opening hundreds
//! could leave none for anyone else. The address is the TCP peer's: behind a reverse proxy every
//! client shares the proxy's, and the cap is then the proxy's as a whole.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The cap when none is configured: far more than a browser app opens, far fewer than the
/// descriptors a process usually has.
pub const DEFAULT_MAX_PER_ADDRESS: usize = 128;

/// Open sockets per address, at most `max` each (0: no cap).
#[derive(Debug, Default)]
pub struct Sockets {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Sockets {
    pub fn new(max: usize) -> Arc<Sockets> {
        Arc::new(Sockets {
            max,
            open: Mutex::default(),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// A place for one more socket from `addr`, held until dropped; None when it has `max` open.
    pub fn open(self: &Arc<Self>, addr: IpAddr) -> Option<Socket> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(addr).or_default();
        if self.max > 0 && *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Socket {
            sockets: self.clone(),
            addr,
        })
    }
}

/// One open socket, counted against its address until dropped.
#[derive(Debug)]
pub struct Socket {
    sockets: Arc<Sockets>,
    addr: IpAddr,
}

impl Drop for Socket {
    fn drop(&mut self) {
        let mut open = self.sockets.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.addr) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.addr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_count_and_a_closed_socket_frees_its_place() {
        let sockets = Sockets::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = sockets.open(a).unwrap();
        let _second = sockets.open(a).unwrap();
        assert!(sockets.open(a).is_none());
        let _other = sockets.open(b).expect("another address has its own count");
        drop(first);
        assert!(sockets.open(a).is_some(), "a closed socket frees its place");
        let unlimited = Sockets::new(0);
        let held: Vec<_> = (0..1000).map(|_| unlimited.open(a).unwrap()).collect();
        assert_eq!(held.len(), 1000);
    }
}
