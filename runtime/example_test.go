package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// NewConfig applies the defaults, then the environment, then the options: an explicit
// option beats the environment, except ZARIS_DISABLE_RETRIES=true, which wins over all.
func ExampleNewConfig() {
	environment := map[string]string{
		"ZARIS_REQUEST_TIMEOUT":            "90",
		"ZARIS_CLIENT_MAP_REFRESH_WAIT_MS": "2000",
		"ZARIS_DISABLE_RETRIES":            "true",
	}
	cfg, err := runtime.NewConfig(
		runtime.WithEnv(func(k string) (string, bool) { v, ok := environment[k]; return v, ok }),
		runtime.WithSeeds("10.0.0.1:7000", "10.0.0.2:7000"),
		runtime.WithRefreshWait(5*time.Second),
		runtime.WithDefaultMaxAttempts(5),
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("request timeout:", cfg.Retry.RequestTimeout)
	fmt.Println("refresh wait:", cfg.RefreshWait)
	fmt.Println("max attempts:", cfg.Retry.MaxAttempts, "disabled:", cfg.Retry.Disabled)

	_, err = runtime.NewConfig(
		runtime.WithEnv(func(k string) (string, bool) { return "soon", k == "ZARIS_REQUEST_TIMEOUT" }),
		runtime.WithSeeds("10.0.0.1:7000"),
	)
	var ce *runtime.ConfigError
	if !errors.As(err, &ce) {
		fmt.Println("not a *runtime.ConfigError:", err)
		return
	}
	fmt.Println(ce.Var, ce.Value)
	// Output:
	// request timeout: 1m30s
	// refresh wait: 5s
	// max attempts: 1 disabled: true
	// ZARIS_REQUEST_TIMEOUT soon
}

// Segment is where a key lives: the CRC-32 (IEEE) of its bytes modulo the map's segment
// count, the same function the store places keys with.
func ExampleSegment() {
	for _, key := range []string{"user:0", "user:4", "user:5"} {
		fmt.Println(key, clustermap.SegmentOf([]byte(key), 4))
	}
	// Output:
	// user:0 0
	// user:4 1
	// user:5 3
}

// Dial fetches the first map from a seed; the middleware stack (middleware.Default) sits
// on top of Invoke, and the generated zarisclient on top of that.
func ExampleDial() {
	ctx := context.Background()
	engine, err := runtime.Dial(ctx,
		runtime.WithSeeds("127.0.0.1:7000"),
		runtime.WithProtocol(runtime.ProtocolCompact),
		runtime.WithAttemptTimeout(2*time.Second),
	)
	if err != nil {
		fmt.Println(errors.Is(err, runtime.ErrNoSeeds))
		return
	}
	defer engine.Close()
	fmt.Println("map epoch", engine.Map().Epoch)
}
