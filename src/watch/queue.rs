//! A bounded queue between threads that allocates as it fills, not up front: a watched project
//! keeps one of 65,536 slots (its watcher's notes to the event pump), and
//! `std::sync::mpsc::sync_channel` would allocate and touch every slot (3.5 MiB per project)
//! before the first event.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// Makes a queue of at most `capacity` messages.
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        Sender {
            tx,
            queued: queued.clone(),
            capacity,
        },
        Receiver { rx, queued },
    )
}

/// Why [`Sender::try_send`] failed; the message comes back.
#[derive(Debug)]
pub enum SendError<T> {
    /// `capacity` messages wait already.
    Full(T),
    /// The receiver is gone.
    Disconnected(T),
}

pub struct Sender<T> {
    tx: mpsc::Sender<T>,
    queued: Arc<AtomicUsize>,
    capacity: usize,
}

impl<T> Sender<T> {
    /// Queues `msg` unless the queue is full; never blocks.
    pub fn try_send(&self, msg: T) -> Result<(), SendError<T>> {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(SendError::Full(msg));
        }
        self.tx.send(msg).map_err(|e| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            SendError::Disconnected(e.0)
        })
    }
}

pub struct Receiver<T> {
    rx: mpsc::Receiver<T>,
    queued: Arc<AtomicUsize>,
}

impl<T> Receiver<T> {
    /// Waits for a message; Err once every sender is gone and the queue is empty.
    pub fn recv(&self) -> Result<T, mpsc::RecvError> {
        self.rx.recv().inspect(|_| self.took())
    }

    /// A message if one waits, without waiting.
    pub fn try_recv(&self) -> Result<T, mpsc::TryRecvError> {
        self.rx.try_recv().inspect(|_| self.took())
    }

    fn took(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_most_its_capacity_and_frees_slots_as_they_are_taken() {
        let (tx, rx) = bounded(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert!(matches!(tx.try_send(3), Err(SendError::Full(3))));
        assert_eq!(rx.recv().unwrap(), 1);
        tx.try_send(4).unwrap();
        assert_eq!(rx.try_recv().unwrap(), 2);
        assert_eq!(rx.recv().unwrap(), 4);
        tx.try_send(6).unwrap();
        assert_eq!(rx.try_recv().unwrap(), 6);
        assert!(rx.try_recv().is_err());
        tx.try_send(7).unwrap();
        tx.try_send(8).unwrap();
        assert!(matches!(tx.try_send(9), Err(SendError::Full(9))));
        assert_eq!(rx.try_recv().unwrap(), 7);
        drop(rx);
        assert!(matches!(tx.try_send(5), Err(SendError::Disconnected(5))));
    }
}
