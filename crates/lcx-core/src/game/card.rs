//! A card packed in one byte: colour in the high nibble, rank in the low one.
//! Packing (instead of the spec's `colour·(n_ranks+1)+rank` code) makes colour
//! and rank a shift and a mask on the hot path; [`super::Rules::card_code`]
//! gives the spec's code where it is needed (encoding histogram, fixtures).

use serde::{Deserialize, Serialize};

/// One card: colour `0..n_colors`, rank 0 (handshake) or `1..=n_ranks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Card(u8);

impl Card {
    /// Builds a card. Colour and rank must each be below 16 (the engine's
    /// capacities guarantee this for every valid rules config).
    #[inline]
    pub const fn new(color: u8, rank: u8) -> Self {
        debug_assert!(color < 16 && rank < 16);
        Card((color << 4) | (rank & 0x0f))
    }

    #[inline]
    pub const fn color(self) -> u8 {
        self.0 >> 4
    }

    /// Rank index: 0 for a handshake, 1..=n_ranks for numbers.
    #[inline]
    pub const fn rank(self) -> u8 {
        self.0 & 0x0f
    }

    #[inline]
    pub const fn is_handshake(self) -> bool {
        self.rank() == 0
    }

    /// The packed byte (stable within a process; not the spec's card code).
    #[inline]
    pub const fn packed(self) -> u8 {
        self.0
    }

    /// Inverse of [`Self::packed`].
    #[inline]
    pub(crate) const fn from_packed(b: u8) -> Self {
        Card(b)
    }
}

impl std::fmt::Display for Card {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({},{})", self.color(), self.rank())
    }
}

/// JSON form `{"color": c, "rank": r}` used by snapshots and fixtures.
#[derive(Serialize, Deserialize)]
struct CardRepr {
    color: u32,
    rank: u32,
}

impl Serialize for Card {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CardRepr {
            color: self.color() as u32,
            rank: self.rank() as u32,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Card {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = CardRepr::deserialize(d)?;
        if r.color >= 16 || r.rank >= 16 {
            return Err(serde::de::Error::custom(format!(
                "card colour {} / rank {} out of range (each must be < 16)",
                r.color, r.rank
            )));
        }
        Ok(Card::new(r.color as u8, r.rank as u8))
    }
}
