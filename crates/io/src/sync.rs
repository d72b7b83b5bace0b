//! The one lock-poisoning policy of every SolidGraph crate.
//!
//! A lock is poisoned when a thread panicked while holding it. The engine
//! never panics on user input or on a damaged file, so a poison means a bug
//! interrupted an update, and the data behind the lock may be half-changed.
//! Continuing on it could return silently wrong data, so every later use
//! panics too, with a message that says so (the Python binding turns the
//! panic into an exception; reopening the store starts from the disk).
//! Locks are taken only through these methods, so the policy is stated
//! once and applied everywhere.

use std::sync::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

const POISONED: &str = "a SolidGraph lock is poisoned: a thread panicked while holding it (a bug; reopen the store)";

/// `lock`, `get_mut` and `into_inner` under the policy above.
pub trait MutexExt<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
    fn get_mut_locked(&mut self) -> &mut T;
    fn into_inner_locked(self) -> T;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().expect(POISONED)
    }
    fn get_mut_locked(&mut self) -> &mut T {
        self.get_mut().expect(POISONED)
    }
    fn into_inner_locked(self) -> T {
        self.into_inner().expect(POISONED)
    }
}

/// `read` and `write` under the policy above.
pub trait RwLockExt<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().expect(POISONED)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().expect(POISONED)
    }
}

/// `wait` under the policy above.
pub trait CondvarExt {
    fn wait_locked<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;
}

impl CondvarExt for Condvar {
    fn wait_locked<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait(guard).expect(POISONED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_panics_with_the_policy_message() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.locked();
            panic!("interrupted update");
        })
        .join();
        let e = std::panic::catch_unwind(|| *m.locked()).unwrap_err();
        let msg = e.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
        assert!(msg.contains("lock is poisoned"), "{msg}");
        let e = std::panic::catch_unwind(move || std::sync::Arc::into_inner(m).map(Mutex::into_inner_locked)).unwrap_err();
        let msg = e.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
        assert!(msg.contains("lock is poisoned"), "{msg}");
        let mut m = Mutex::new(1);
        *m.get_mut_locked() += 1;
        assert_eq!(m.into_inner_locked(), 2);
        let r = RwLock::new(2);
        *r.write_locked() += 1;
        assert_eq!(*r.read_locked(), 3);
    }
}
