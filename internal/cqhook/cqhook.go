// Package cqhook is how transport cores append completions to a
// verbs.CompletionQueue without the queue exporting a Push method that
// applications could call.
//
// Package verbs installs its unexported push function here when it is
// initialised; transport cores (metaroce, rocev2) fetch it once, typed, into
// a package variable. Being internal, the hook is reachable from this
// module's own packages only: an application in another module sees a
// completion queue it can Poll and nothing else. It imports nothing, so
// verbs can import it without a cycle.
package cqhook

var push any

// Install records the push function. Package verbs calls it once, from its
// package initialisation, before any importer's package variables are set.
func Install(f any) { push = f }

// Push returns the installed push function as F (which must be its exact
// type). Call it from a package-level variable declaration, so the type
// assertion runs once and not per completion.
func Push[F any]() F { return push.(F) }
