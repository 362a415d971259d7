package main

import (
	"context"
	"fmt"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// runVersion prints the version of the client runtime zaris is built with and the version of
// zarisgen that generated its typed client, one per line.
func runVersion(_ context.Context, c *cli, _ []string) int {
	fmt.Fprintf(c.stdout, "client runtime %s\ngenerated code zarisgen %s\n", runtime.Version, zarisclient.GeneratorVersion)
	return exitOK
}
