//! CPU cost per packet by component: `nesquic-model`'s (the arithmetic on a profile and a
//! measured datagram count), re-exported where the profile's users have always found it.

pub use nesquic_model::packet_cost::*;
