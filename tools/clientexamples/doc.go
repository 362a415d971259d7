// Package clientexamples holds the client's examples and tests that run against an in-process
// reference store. They live in the tools module, not next to the client packages they show,
// so that the store and its dependencies stay out of the client module's build; the examples
// use only the client's public API plus store.NewCluster or store.StartCluster.
package clientexamples
