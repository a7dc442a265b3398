package sim

import "sort"

// transports is every transport experiments can run, by name: one adapter
// each. It is a table, not a registry filled from init functions, so the
// set is fixed when the program is built, visible in one place, and the
// same whatever packages happen to be linked in. Each key is its
// transport's Name.
var transports = map[string]Transport{
	"metaroce": metaroceTransport{},
	"rocev2":   rocev2Transport{},
}

// Transports returns the transports' names, metaroce first and the rest
// in name order, the default order of side-by-side results.
func Transports() []string {
	names := make([]string, 0, len(transports))
	for n := range transports {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "metaroce") != (names[j] == "metaroce") {
			return names[i] == "metaroce"
		}
		return names[i] < names[j]
	})
	return names
}

func lookupTransport(name string) (Transport, bool) {
	t, ok := transports[name]
	return t, ok
}
