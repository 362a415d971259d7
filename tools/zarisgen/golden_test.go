package main

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/internal/thrifttest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// requireThrift returns the Thrift compiler's path (thrifttest.Require).
func requireThrift(t *testing.T) string {
	t.Helper()
	return thrifttest.Require(t, "zarisgen cannot read an IDL")
}

// repoRoot is the repository root (the client module), two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// makeGoGenerate is the -go-generate command `make generate` passes zarisgen: the
// directive in gen/zarisclient runs `make generate` from the repository's root.
const makeGoGenerate = "make -C ../.. generate"

// The generator's output for each fixture IDL matches its golden file byte for byte. The real
// IDL's golden file is the committed gen/zarisclient, generated with make generate's flags.
func TestGolden(t *testing.T) {
	thriftBin := requireThrift(t)
	for _, tc := range []struct {
		name, idl, source, golden, goGenerate, codec string
	}{
		{"zaris", "../../idl/zaris.thrift", "idl/zaris.thrift", "../../gen/zarisclient/" + outputFile, makeGoGenerate, "../../gen/zariscodec"},
		{"extra_op", "testdata/extra_op.thrift", "testdata/extra_op.thrift", "testdata/extra_op.golden", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadIDL(thriftBin, tc.idl)
			require.NoError(t, err)
			gen := func() ([]byte, error) {
				m, err := buildModel(p, tc.source, defaultZarisImport)
				if err != nil {
					return nil, err
				}
				m.GoGenerate = tc.goGenerate
				if tc.codec != "" {
					m.CodecImport = codecImport(defaultZarisImport, tc.codec)
				}
				return render(m)
			}
			got, err := gen()
			require.NoError(t, err)
			again, err := gen()
			require.NoError(t, err)
			require.Equal(t, string(got), string(again), "output must be deterministic")
			if *update && strings.HasPrefix(tc.golden, "testdata/") {
				require.NoError(t, os.WriteFile(tc.golden, got, 0o644))
			}
			want, err := os.ReadFile(tc.golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "regenerate with: go -C tools test ./zarisgen -run TestGolden -update (fixtures) or make generate (gen/)")
		})
	}
}

// The Unimplemented base of the real IDL is the committed gen/zarisserver.
func TestGoldenServer(t *testing.T) {
	thriftBin := requireThrift(t)
	p, err := loadIDL(thriftBin, "../../idl/zaris.thrift")
	require.NoError(t, err)
	m, err := buildModel(p, "idl/zaris.thrift", defaultZarisImport)
	require.NoError(t, err)
	m.ServerPackage = "zarisserver"
	got, err := renderServer(m)
	require.NoError(t, err)
	want, err := os.ReadFile("../../gen/zarisserver/" + serverFile)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "regenerate with make generate")
}

// Adding an operation (single-key or multi-key) to the IDL with its annotations and running
// `make generate` yields a typed method that compiles with no hand edit: a scratch copy of the module gets the extra-op
// fixture as its IDL, is regenerated, and a program using the new method is built against it.
func TestExtraOpCompiles(t *testing.T) {
	requireThrift(t)
	if testing.Short() {
		t.Skip("regenerates and builds a copy of the module")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	copyModule(t, root, dir)
	fixture, err := os.ReadFile("testdata/extra_op.thrift")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idl", "zaris.thrift"), fixture, 0o644))
	// A use of the new typed method and descriptor, so the build proves they exist with the
	// expected types.
	use := `package use

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
)

func Append(ctx context.Context, c *zarisclient.Client) (*zaris.AppendResponse, error) {
	_ = zarisclient.OpAppend.Idempotent
	return c.Append(ctx, &zaris.AppendRequest{Key: []byte("k"), Suffix: []byte("!")})
}

func MultiAppend(ctx context.Context, c *zarisclient.Client) ([]*zaris.AppendOutcome, error) {
	_ = zarisclient.OpMultiAppend.Idempotent
	res, err := c.MultiAppend(ctx, &zaris.MultiAppendRequest{Items: []*zaris.AppendItem{{Key: "k", Suffix: []byte("!")}}})
	if err != nil {
		return nil, err
	}
	return res.Response.Outcomes, res.Err(0)
}
`
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "use"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "use", "use.go"), []byte(use), 0o644))
	for _, args := range [][]string{{"make", "-s", "generate"}, {"go", "build", "./gen/...", "./use/..."}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", strings.Join(args, " "), out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "gen", "zarisclient", outputFile))
	require.NoError(t, err)
	assert.Contains(t, string(got), "func (c *Client) Append(ctx context.Context, req *zaris.AppendRequest, opts ...runtime.CallOption) (*zaris.AppendResponse, error)")
	assert.Contains(t, string(got), "func (c *Client) MultiAppend(ctx context.Context, req *zaris.MultiAppendRequest, opts ...runtime.CallOption) (*batch.Result[*zaris.MultiAppendResponse], error)")
}

// copyModule copies into dst what `make generate` and a build of the client need from the
// checkout at root (the client module, the Makefile, the IDLs, gen/, zarisgen and the tools
// module's go.mod), the workspace file when there is one, and the paths of extra.
func copyModule(t *testing.T, root, dst string, extra ...string) {
	t.Helper()
	paths := []string{"go.mod", "go.sum", "Makefile", "idl", "gen", "internal", "runtime", "middleware",
		"tools/go.mod", "tools/go.sum", "tools/idl", "tools/zarisgen"}
	for _, p := range []string{"go.work", "go.work.sum"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			paths = append(paths, p)
		}
	}
	for _, p := range append(paths, extra...) {
		copyTree(t, filepath.Join(root, p), filepath.Join(dst, p))
	}
}

// copyTree copies the file or directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	require.NoError(t, err)
}

// newModule makes the module example.com/<name> in a temporary directory from
// testdata/<dir> (its IDL, idl/<name>.thrift, and its tests), requiring the client as this
// checkout has it, changes into it and writes the Thrift compiler's code of the IDL under
// gen/. It skips the test in -short mode.
func newModule(t *testing.T, thriftBin, dir, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("generates and tests a module of its own")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	copyTree(t, filepath.Join("testdata", dir), tmp)
	gomod := "module example.com/" + name + "\n\ngo 1.26\n\nrequire github.com/clustron/zaris-go v0.0.0\n\nreplace github.com/clustron/zaris-go => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(gomod), 0o644))
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "go.sum"), sums, 0o644))

	t.Chdir(tmp)
	require.NoError(t, os.Mkdir("gen", 0o755))
	out, err := exec.Command(thriftBin, "--gen", "go:package_prefix=example.com/"+name+"/gen/,skip_remote",
		"-out", "gen", "idl/"+name+".thrift").CombinedOutput()
	require.NoError(t, err, "thrift:\n%s", out)
}

// goTestModule runs the tests of the module in the working directory, the label module, and
// returns their verbose output; it fails the test if they fail. -mod=mod completes the
// module's requirements (the Thrift library the generated code imports) through the
// configured proxy, with the checksums of this checkout's go.sum.
func goTestModule(t *testing.T, label string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "./...")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in the %s module:\n%s", label, out)
	return string(out)
}
