//! The space a decode writes besides its events: simd-json's copy of the body and the arena of
//! the texts the decoder writes, kept per thread between requests.

use std::cell::RefCell;

use bumpalo::Bump;

/// What a body's events borrow besides the body, kept by the caller as long as the events:
/// the copy simd-json parses in place (strings, unescaped there), and the texts the decoder
/// writes (a `context` or `integrations` merged with the batch's, an object encoded again, a
/// messageId it makes), so an event needs no allocation of its own.
#[derive(Default)]
pub struct Scratch {
    pub(super) copy: Vec<u8>,
    pub(super) texts: Bump,
}

/// The most a thread keeps of a [`Scratch`] between requests, for its copy and for its arena
/// each: a body up to this size (the HTTP workers parse up to 64 KiB themselves) then needs no
/// allocation for them. Kept: at most twice this per thread that decodes.
const KEPT_SCRATCH_BYTES: usize = 128 * 1024;

thread_local! {
    static KEPT_SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

impl Scratch {
    /// This thread's kept scratch space (a new one if none is kept, or if it is in use by
    /// another request of this thread), given back when the guard drops: a request's copy of
    /// its body and its arena are then allocated once per thread, not once per request.
    pub fn kept() -> KeptScratch {
        let kept = KEPT_SCRATCH.with(|k| k.try_borrow_mut().ok().and_then(|mut k| k.take()));
        KeptScratch(kept.unwrap_or_default())
    }
}

/// A [`Scratch`] that goes back to its thread when dropped, unless it grew past
/// [`KEPT_SCRATCH_BYTES`] (a rare big body's space is freed).
pub struct KeptScratch(Scratch);

impl std::ops::Deref for KeptScratch {
    type Target = Scratch;

    fn deref(&self) -> &Scratch {
        &self.0
    }
}

impl std::ops::DerefMut for KeptScratch {
    fn deref_mut(&mut self) -> &mut Scratch {
        &mut self.0
    }
}

impl Drop for KeptScratch {
    fn drop(&mut self) {
        let scratch = std::mem::take(&mut self.0);
        if scratch.copy.capacity() > KEPT_SCRATCH_BYTES
            || scratch.texts.allocated_bytes() > KEPT_SCRATCH_BYTES
        {
            return;
        }
        // `try_with`: a guard dropped while its thread ends keeps nothing.
        let _ = KEPT_SCRATCH.try_with(|k| {
            if let Ok(mut k) = k.try_borrow_mut() {
                k.get_or_insert(scratch);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept_capacity() -> Option<usize> {
        KEPT_SCRATCH.with(|k| k.borrow().as_ref().map(|s| s.copy.capacity()))
    }

    #[test]
    fn a_thread_keeps_one_scratch_and_gives_it_to_its_next_request() {
        drop(KEPT_SCRATCH.with(|k| k.borrow_mut().take()));
        let mut first = Scratch::kept();
        first.copy.reserve(1000);
        let at = first.copy.as_ptr();
        drop(first);
        let second = Scratch::kept();
        assert_eq!(
            second.copy.as_ptr(),
            at,
            "the same buffer, no new allocation"
        );
        // Another request of the thread while the second is in flight: space of its own.
        let mut third = Scratch::kept();
        assert_eq!(third.copy.capacity(), 0);
        third.copy.reserve(10);
        let small = third.copy.capacity();
        drop(third);
        // One is kept: the first back; the second's is then freed.
        drop(second);
        assert_eq!(kept_capacity(), Some(small));
    }

    #[test]
    fn a_scratch_grown_past_the_bound_is_not_kept() {
        // Whatever an earlier test left here goes first.
        drop(KEPT_SCRATCH.with(|k| k.borrow_mut().take()));
        let mut big = Scratch::kept();
        big.copy.reserve(KEPT_SCRATCH_BYTES + 1);
        drop(big);
        assert_eq!(kept_capacity(), None);
        let mut small = Scratch::kept();
        small.copy.reserve(100);
        drop(small);
        assert!(kept_capacity().is_some_and(|c| c >= 100));
    }
}
