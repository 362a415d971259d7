package runtime_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbiddenInClient are the import path prefixes that must never enter the client's build:
// etcd and grpc (the store's control plane) and the tools module itself.
var forbiddenInClient = []string{
	"go.etcd.io/",
	"google.golang.org/grpc",
	"github.com/clustron/zaris-go/tools/",
}

// clientModuleEnv is the environment for go commands about the client module alone, as
// its users build it: the workspace (go.work, which adds the tools module) is left out.
func clientModuleEnv() []string { return append(os.Environ(), "GOWORK=off") }

// forbidden returns the paths in list (one a line) that start with a forbidden prefix.
func forbidden(list string) []string {
	var out []string
	for _, p := range strings.Fields(list) {
		for _, prefix := range forbiddenInClient {
			if strings.HasPrefix(p, prefix) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func TestForbidden_FindsStoreDependencies(t *testing.T) {
	list := "context\ngo.etcd.io/etcd/client/v3\ngithub.com/apache/thrift/lib/go/thrift\n" +
		"google.golang.org/grpc/codes\ngithub.com/clustron/zaris-go/tools/store\ngithub.com/clustron/zaris-go/runtime\n"
	assert.Equal(t, []string{"go.etcd.io/etcd/client/v3", "google.golang.org/grpc/codes", "github.com/clustron/zaris-go/tools/store"}, forbidden(list))
}

// The client packages, their tests included, build with no etcd, no grpc and nothing from
// the tools module: `go list -deps -test` over gen/..., runtime/... and middleware/... names
// none of them, and neither does the client module's own module graph.
func TestClientPackagesLeaveOutStoreDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list the client's dependencies")
	run := func(args ...string) string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = ".." // the client module's root
		cmd.Env = clientModuleEnv()
		out, err := cmd.Output()
		require.NoError(t, err, "go %s", strings.Join(args, " "))
		return string(out)
	}
	deps := run("list", "-deps", "-test", "./gen/...", "./runtime/...", "./middleware/...")
	require.Contains(t, deps, "github.com/apache/thrift/lib/go/thrift", "the listing must be the client's dependencies")
	assert.Empty(t, forbidden(deps), "client packages depend on store-only packages")
	mods := run("list", "-m", "-f", "{{.Path}}/", "all")
	assert.Empty(t, forbidden(mods), "the client module's graph holds store-only modules")
}

// genDeps returns the generated packages (gen/...) that pkgs depend on.
func genDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list dependencies")
	cmd := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = ".." // the client module's root
	cmd.Env = clientModuleEnv()
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps %s", strings.Join(pkgs, " "))
	require.Contains(t, string(out), "github.com/clustron/zaris-go/runtime", "the listing must hold the engine")
	var gen []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/clustron/zaris-go/gen/") {
			gen = append(gen, p)
		}
	}
	return gen
}

// The engine knows no IDL: runtime and the middleware packages, their test fakes included,
// build without any generated package (gen/...), which reaches them only as runtime.Service
// and runtime.Op values. internal/testsupport/zaristest, which binds the fakes to the
// generated Zaris service, shows the listing finds such an import.
func TestEngineImportsNoGeneratedPackage(t *testing.T) {
	assert.Empty(t, genDeps(t, "./runtime/...", "./middleware/..."),
		"runtime or middleware imports a generated package")
	assert.Contains(t, genDeps(t, "./internal/testsupport/zaristest"), "github.com/clustron/zaris-go/gen/zaris")
}

// The packages of internal/ outside internal/testsupport are what the engine and the store
// stand on: none depends on gen, runtime or middleware, so none sits above the engine.
// internal/testsupport, which does, is for tests alone.
func TestInternalPackagesSitBelowTheEngine(t *testing.T) {
	const module = "github.com/clustron/zaris-go/"
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list dependencies")
	list := func(args ...string) []string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = ".." // the client module's root
		cmd.Env = clientModuleEnv()
		out, err := cmd.Output()
		require.NoError(t, err, "go %s", strings.Join(args, " "))
		return strings.Fields(string(out))
	}
	var below []string
	for _, p := range list("list", "./internal/...") {
		if !strings.HasPrefix(p, module+"internal/testsupport/") {
			below = append(below, p)
		}
	}
	require.Contains(t, below, module+"internal/thriftbuf", "the listing must hold the engine's internal packages")
	for _, p := range list(append([]string{"list", "-deps"}, below...)...) {
		for _, engine := range []string{"gen/", "runtime", "middleware"} {
			assert.False(t, strings.HasPrefix(p, module+engine), "an internal package below the engine depends on %s", p)
		}
	}
}
