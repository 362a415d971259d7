package main

import "strings"

// version is zarisgen's version (zarisgen -version). The code it generates names it twice:
// in its header, and in its compile-time check of the runtime, runtime.IsAtLeastVersion<version>
// with the dots as underscores (versionCheck), a constant that runtime/version.go declares
// from this version on. Generated code therefore builds only against a runtime at least as
// new as the generator; a release that changes what generated code relies on bumps this and
// adds the constant to the runtime.
const version = "0.1.0"

// thriftVersion is the Thrift compiler zarisgen and `make generate` are tested with (the
// Debian 12 thrift-compiler package).
const thriftVersion = "0.17.0"

// versionCheck is the runtime constant that generated code refers to: IsAtLeastVersion0_1_0
// for version 0.1.0.
func versionCheck() string {
	return "IsAtLeastVersion" + strings.ReplaceAll(version, ".", "_")
}
