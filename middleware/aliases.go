package middleware

import "github.com/clustron/zaris-go/runtime"

// The four types a middleware is written with are runtime's, named here as well. runtime
// defines them because its options take them (runtime.WithCallMiddleware,
// runtime.WithClassifiers) and it may not import this package; the aliases let a middleware
// or classifier be written against this package alone. Each is the same type as runtime's,
// so either name can be used anywhere.
type (
	// Handler handles one call; see runtime.Handler.
	Handler = runtime.Handler
	// Middleware wraps a Handler in one concern; see runtime.Middleware.
	Middleware = runtime.Middleware
	// Outcome is what one attempt produced, as a Classifier sees it; see runtime.Outcome.
	Outcome = runtime.Outcome
	// Classifier judges one attempt's outcome; see runtime.Classifier.
	Classifier = runtime.Classifier
)
