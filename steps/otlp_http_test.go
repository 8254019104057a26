package steps

import (
	"context"
	"strings"
	"testing"
)

// TestOTLPExportOverHTTP: with --otlp-protocol http the proxy is told to
// send its spans over OTLP/HTTP to the collector's HTTP endpoint, and the
// otlp-export scenarios pass on the reference (told gRPC on that port, it
// would send nothing the collector takes, and they would fail); a protocol
// the suite does not know is refused.
func TestOTLPExportOverHTTP(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	rep, err := Run(context.Background(), Options{Target: "inprocess", Tags: "@otlp-export", AllFeatures: true,
		OTLPProtocol: "http", Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	var otlpFeature *FeatureReport
	for i, f := range rep.Features {
		if f.Name == FeatureOTLPExport {
			otlpFeature = &rep.Features[i]
		}
	}
	if otlpFeature == nil || otlpFeature.Result != Passed || otlpFeature.Passed != 4 {
		t.Errorf("otlp-export over OTLP/HTTP: %+v, want its 4 scenarios passed:\n%s", otlpFeature, out.String())
	}
	if _, err := Run(context.Background(), Options{Target: "inprocess", OTLPProtocol: "thrift", Output: &strings.Builder{}}); err == nil || !strings.Contains(err.Error(), `--otlp-protocol "thrift": want grpc or http`) {
		t.Errorf("an unknown protocol: %v", err)
	}
}
