package memlink

import "fmt"

// Stats counts what the link did with the packets it was given, per cause.
// Every sent packet is either dropped for exactly one cause or delivered;
// a duplicate adds one delivery. So once nothing is in flight:
//
//	Sent - (DroppedRandom + DroppedPath + DroppedBurst + DroppedBlackout)
//	     + Duplicated == Delivered
type Stats struct {
	Sent            uint64 // packets passed to Send
	Delivered       uint64 // packets handed to a Deliver callback, duplicates included
	DroppedRandom   uint64 // dropped by Config.Loss
	DroppedPath     uint64 // dropped by Config.PathLoss
	DroppedBurst    uint64 // dropped by the Gilbert–Elliott model (Config.Bursty)
	DroppedBlackout uint64 // dropped by a Config.Blackouts entry
	Duplicated      uint64 // extra copies scheduled (Config.Duplicate)
	Corrupted       uint64 // copies with one bit flipped (Config.Corrupt)
	Reordered       uint64 // packets given the extra ReorderDelay (Config.Reorder)
	Held            uint64 // packets delayed by a Hold (Config.Holds, AddHold)
}

// Dropped is the sum of all drop causes.
func (s Stats) Dropped() uint64 {
	return s.DroppedRandom + s.DroppedPath + s.DroppedBurst + s.DroppedBlackout
}

func (s Stats) String() string {
	return fmt.Sprintf("sent=%d delivered=%d dropped{random=%d path=%d burst=%d blackout=%d} duplicated=%d corrupted=%d reordered=%d held=%d",
		s.Sent, s.Delivered, s.DroppedRandom, s.DroppedPath, s.DroppedBurst, s.DroppedBlackout,
		s.Duplicated, s.Corrupted, s.Reordered, s.Held)
}
