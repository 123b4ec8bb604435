//! Locks that are safe to share with interrupt handlers.

use crate::arch::irq::IrqGuard;

/// A spin lock taken with interrupts disabled on the local CPU, so an interrupt
/// handler on the same CPU can never spin on a lock its own CPU holds. Never take one
/// from NMI context.
pub struct IrqMutex<T> {
    inner: spin::Mutex<T>,
}

/// Access to the data of a locked [`IrqMutex`]; interrupts stay off until it drops.
pub struct IrqMutexGuard<'a, T> {
    // Field order matters: the lock is released before interrupts are restored.
    guard: spin::MutexGuard<'a, T>,
    _irq: IrqGuard,
}

impl<T> IrqMutex<T> {
    /// A new unlocked mutex.
    pub const fn new(value: T) -> Self {
        Self { inner: spin::Mutex::new(value) }
    }

    /// Disables interrupts and takes the lock if it is free; `None` otherwise.
    pub fn try_lock(&self) -> Option<IrqMutexGuard<'_, T>> {
        let irq = IrqGuard::new();
        Some(IrqMutexGuard { guard: self.inner.try_lock()?, _irq: irq })
    }

    /// Disables interrupts, then spins until the lock is ours.
    pub fn lock(&self) -> IrqMutexGuard<'_, T> {
        let irq = IrqGuard::new();
        IrqMutexGuard { guard: self.inner.lock(), _irq: irq }
    }
}

impl<T> core::ops::Deref for IrqMutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> core::ops::DerefMut for IrqMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
