//! Control-message plumbing for `UDP_SEGMENT` (send) and `UDP_GRO` (receive).

use std::mem;

/// Space for one control message carrying an `int`, the largest we send or expect.
pub(crate) const CMSG_SPACE: usize = 64;

/// An aligned control-message buffer.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct CmsgBuf(pub(crate) [u8; CMSG_SPACE]);

impl Default for CmsgBuf {
    fn default() -> Self {
        Self([0; CMSG_SPACE])
    }
}

/// Writes a `SOL_UDP`/`UDP_SEGMENT` control message into `buf` and points `hdr` at it.
pub(crate) fn write_segment_size(hdr: &mut libc::msghdr, buf: &mut CmsgBuf, segment_size: u16) {
    hdr.msg_control = buf.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE of a u16 is a small constant far below CMSG_SPACE bytes.
    let space = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as u32) } as usize;
    hdr.msg_controllen = space as _;
    // SAFETY: msg_control points at `buf`, which is aligned and large enough for one cmsg, so
    // CMSG_FIRSTHDR returns a valid, writable header inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(hdr);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment_size);
    }
}

/// Finds the GRO segment size in a received message's control data, if the kernel coalesced.
pub(crate) fn read_gro_stride(hdr: &libc::msghdr) -> Option<usize> {
    if hdr.msg_control.is_null() || hdr.msg_controllen == 0 {
        return None;
    }
    // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG_* macros only walk inside
    // msg_controllen bytes.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let stride = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return usize::try_from(stride).ok().filter(|s| *s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}
