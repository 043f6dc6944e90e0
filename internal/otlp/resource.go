package otlp

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Resource describes dbiolat to the collector: service.name "dbiolat",
// its version, the host's name; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES add to it or override it, as in every SDK.
func Resource(ctx context.Context, version string) (*resource.Resource, error) {
	r, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "dbiolat"), attribute.String("service.version", version)),
		resource.WithHost(),
		resource.WithFromEnv(), // last: the environment wins
	)
	if err != nil {
		return nil, fmt.Errorf("the OpenTelemetry resource: %w (see OTEL_RESOURCE_ATTRIBUTES)", err)
	}
	return r, nil
}
