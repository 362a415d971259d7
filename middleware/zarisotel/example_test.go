package zarisotel_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/middleware/zarisotel"
	"github.com/clustron/zaris-go/runtime"
)

// The OpenTelemetry middleware records a span per call, with an event per attempt, and the
// client's metrics. A service installs its own SDK and exporters (or registers them with
// otel.SetTracerProvider and otel.SetMeterProvider and passes no provider); here an
// in-memory span recorder and a manual metric reader stand in for them, and a scripted
// transport on a fake clock for the cluster, so that the output is the same on every run.
// In a service: zarisclient.Dial(ctx, ..., runtime.WithCallMiddleware(tel.Middleware())),
// then tel.ObserveRefresher(kv.Engine().Refresher()).
func ExampleTelemetry_Middleware() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	clock := mwt.NewClock()
	tel, err := zarisotel.New(zarisotel.WithTracerProvider(tp), zarisotel.WithMeterProvider(mp),
		zarisotel.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	defer tel.Close()

	transport := mwt.Script(mwt.AnswerAt(zaris.KvStatus_Moved, 7), mwt.AnswerAt(zaris.KvStatus_Ok, 7))
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock,
		CallMiddleware: []runtime.Middleware{tel.Middleware()}}
	handler := middleware.Default(transport.Invoke, mwt.NewRefresher(6), cfg)
	req := &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("ada")}
	call := runtime.NewCall(mwt.Scripted(zarisclient.OpPut), req.Key, req, false) // answered by the script
	if _, err := handler(context.Background(), call); err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.Ended() {
		fmt.Println("span", s.Name(), s.Status().Code)
		for _, e := range s.Events() {
			fmt.Print("  event ", e.Name)
			for _, kv := range e.Attributes {
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
			fmt.Println()
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			var lines []string // data points come in no fixed order
			for _, dp := range data.DataPoints {
				lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, dp.Attributes.Encoded(attributeEncoder), dp.Value))
			}
			slices.Sort(lines)
			fmt.Println(strings.Join(lines, "\n"))
		case metricdata.Histogram[float64]:
			for _, dp := range data.DataPoints {
				fmt.Printf("%s{%s} count %d sum %.3fs\n", m.Name, dp.Attributes.Encoded(attributeEncoder), dp.Count, dp.Sum)
			}
		}
	}
	// Output:
	// span ZarisKv/Put Unset
	//   event zaris.attempt zaris.attempt=1 zaris.node=1 server.address=node1:9090 zaris.map_epoch=0 zaris.status=Moved zaris.answer_epoch=7 zaris.class=refresh-retry zaris.duration_ms=0
	//   event zaris.attempt zaris.attempt=2 zaris.node=1 server.address=node1:9090 zaris.map_epoch=0 zaris.status=Ok zaris.answer_epoch=7 zaris.class=answer zaris.duration_ms=0
	// zaris.client.calls{zaris.op=Put,zaris.outcome=Ok} 1
	// zaris.client.attempts{zaris.op=Put,zaris.outcome=Moved} 1
	// zaris.client.attempts{zaris.op=Put,zaris.outcome=Ok} 1
	// zaris.client.retries{zaris.op=Put,zaris.status=Moved} 1
	// zaris.client.map.refreshes.requested{zaris.op=Put} 1
	// zaris.client.map.refreshes.performed{zaris.op=Put} 1
	// zaris.client.call.duration{zaris.op=Put,zaris.outcome=Ok} count 1 sum 0.100s
}

var attributeEncoder = attribute.DefaultEncoder()
