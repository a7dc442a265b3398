package sim

import (
	"github.com/metaroce/metaroce/verbs"

	"github.com/metaroce/metaroce/sim/fabric"
	"github.com/metaroce/metaroce/sim/units"
	"github.com/metaroce/metaroce/sim/workload"
)

// The simulator's vocabulary that its lower layers define, under the
// names the experiment files' schema, the transports' adapters and the
// CLI know them by (the layers below sim never name sim).
type (
	// Time is the simulator's clock: virtual nanoseconds, as the protocol
	// cores count them.
	Time = verbs.Time
	// Duration is a span of virtual time in an experiment file.
	Duration = units.Duration
	// Size is a byte count in an experiment file.
	Size = units.Size
	// Frame is a packet as --pcap sees it.
	Frame = fabric.Frame
	// ConnRef names a connection in a World: the index of the Dial that
	// opened it.
	ConnRef = workload.ConnRef
	// Completion is a finished message, at either end of its connection.
	Completion = workload.Completion
)

// NeverDuration is how "never" decodes.
const NeverDuration = units.NeverDuration

// hostIP is host h's IPv4 address on plane p (the adapters that put
// addresses into packets use the fabric's).
func hostIP(h int32, p uint8) uint32 { return fabric.HostIP(h, p) }
