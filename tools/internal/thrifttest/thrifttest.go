// Package thrifttest finds the Thrift compiler for the tests that run it.
package thrifttest

import (
	"os"
	"os/exec"
	"testing"
)

// Require returns the Thrift compiler's path. Without one the test is skipped, saying why
// it needs one (why), unless ZARIS_REQUIRE_THRIFT=1 (as in CI), where a missing compiler
// is a failure.
func Require(t testing.TB, why string) string {
	t.Helper()
	path, err := exec.LookPath("thrift")
	if err != nil {
		if os.Getenv("ZARIS_REQUIRE_THRIFT") == "1" {
			t.Fatal("thrift not found but ZARIS_REQUIRE_THRIFT=1: apt-get install thrift-compiler")
		}
		t.Skipf("thrift not found, so %s (apt-get install thrift-compiler); set ZARIS_REQUIRE_THRIFT=1 to fail instead", why)
	}
	return path
}
