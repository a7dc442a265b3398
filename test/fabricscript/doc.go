// Package fabricscript tests scripts/netns-fabric.sh and
// configs/netns-fabric.yaml as a user runs them: the script builds the
// namespace ECMP fabric, `ip route get ... sport` shows how source ports
// spread over the spines, and the built metaroce binary runs perf across
// it. It also holds the path-coverage table of docs/fabric.md (coverage.go),
// so the figures there are computed, not typed.
package fabricscript
