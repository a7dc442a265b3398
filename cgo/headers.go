package cgo

import "embed"

// Headers are this directory's C headers. Nothing reads them at run time:
// they are embedded so that their contents are part of this package's
// compiled output, which the build cache keys of the packages including
// them (they import this one) depend on. See the package comment.
//
//go:embed *.h
var Headers embed.FS
