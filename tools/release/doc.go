// Package release proves that zaris-go's two modules, the client (github.com/clustron/zaris-go)
// and the tools (github.com/clustron/zaris-go/tools), can be released by tag and used by
// version, with no replace directive and no checkout. It has no API: everything lives in its
// test, which packs both modules of the working tree as one version into a file-based module
// proxy and uses them from a module of its own the way a user would: go get, go build,
// go install pkg@version. CONTRIBUTING.md (Releasing) lists the release steps.
package release
