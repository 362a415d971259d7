package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zarisgen serves any partitioned service, not only Zaris: testdata/profiles is the module
// of a team with its own service (another namespace, status enum and classes, map operation
// and a string routing field). Its client is generated as the README says, Thrift first and
// then zarisgen with -zaris-import; its interface of the typed methods is KV, as Zaris's is;
// and the module's rule tests pass against scripted nodes on loopback: a wrong-owner answer
// costs one shared refresh, a slow status backs off by its factor, an answer is never
// retried, and both bounds hold.
func TestSecondService(t *testing.T) {
	thriftBin := requireThrift(t)
	newModule(t, thriftBin, "profiles", "profiles")
	require.NoError(t, run(config{thrift: thriftBin, idl: "idl/profiles.thrift", out: "gen/profilesclient", serverOut: "gen/profilesserver",
		zarisImport: "example.com/profiles/gen/profiles"}))
	client, err := os.ReadFile(filepath.Join("gen", "profilesclient", outputFile))
	require.NoError(t, err)
	assert.Contains(t, string(client), "package profilesclient")
	assert.Contains(t, string(client), `{Value: int64(zaris.ProfileStatus_Resharding), Name: "Resharding", Class: runtime.Retry, SlowFactor: 4},`)
	// The interface of the typed methods has the same name in every generated client, KV
	// (profilesclient.KV here), and *Client implements it.
	assert.Contains(t, string(client), "type KV interface {\n\t// Lookup is Client.Lookup.\n\tLookup(ctx context.Context, req *zaris.LookupRequest, opts ...runtime.CallOption) (*zaris.LookupResponse, error)\n\t// Save is Client.Save.\n")
	assert.Contains(t, string(client), "var _ KV = (*Client)(nil)")

	out := goTestModule(t, "Profiles")
	for _, name := range []string{"TestWrongShardMeansOneSharedRefreshThenTheNewOwner", "TestSlowStatusBacksOffByItsFactor",
		"TestAnswerIsNeverRetried", "TestBothBoundsHold"} {
		assert.Contains(t, out, "--- PASS: "+name, "the Profiles module's rule tests:\n%s", out)
	}
}

// The output directory names the generated package, so it must be a Go identifier.
func TestRunRefusesAnOutputDirectoryThatIsNoPackageName(t *testing.T) {
	thriftBin := requireThrift(t)
	dir := t.TempDir()
	err := run(config{thrift: thriftBin, idl: "testdata/small.thrift", out: filepath.Join(dir, "small-client"), zarisImport: "example.com/small"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-out `+filepath.Join(dir, "small-client")+`: the directory's name "small-client" is the package's name and must be a Go identifier`)
	_, statErr := os.Stat(filepath.Join(dir, "small-client"))
	assert.True(t, os.IsNotExist(statErr), "nothing is written for a refused run")
}
