package metaroce

import "github.com/metaroce/metaroce/verbs"

// Endpoint is a verbs.Transport (the packet interface every backend
// drives) and steers new data by the ports' readiness.
var (
	_ verbs.Transport     = (*Endpoint)(nil)
	_ verbs.PlaneSteering = (*Endpoint)(nil)
)
