package middleware

import (
	"cmp"

	"github.com/clustron/zaris-go/runtime/clock"
)

// orSystem returns c, or the system clock when c is nil: the one default of every layer's
// clock.
func orSystem(c clock.Clock) clock.Clock { return cmp.Or(c, clock.System) }

// isSystem reports whether c is the system clock.
func isSystem(c clock.Clock) bool { return c == clock.System }
