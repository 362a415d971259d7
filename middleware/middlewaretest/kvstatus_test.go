package middlewaretest_test

import (
	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/runtime"
)

// kvStatus is the status of a generated or scripted response, as the IDL's enum.
func kvStatus(resp runtime.Response) zaris.KvStatus {
	return zaris.KvStatus(zt.StatusOf(resp))
}
