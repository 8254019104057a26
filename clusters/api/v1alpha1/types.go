package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayPolicy sets traffic policy (here: local rate limits) on Gateways
// or HTTPRoutes. Its status is the Gateway API PolicyStatus: one entry per
// ancestor Gateway, with Accepted and Attached conditions.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=gateway-api;gwdiag,shortName=gwpol
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GatewayPolicySpec `json:"spec"`
	// +optional
	Status gwv1.PolicyStatus `json:"status,omitempty"`
}

// GatewayPolicyList is a list of GatewayPolicy.
//
// +kubebuilder:object:root=true
type GatewayPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayPolicy `json:"items"`
}

// GatewayPolicySpec is what a policy applies and to what.
type GatewayPolicySpec struct {
	// TargetRefs are the Gateways or HTTPRoutes, in the policy's namespace,
	// the policy applies to. All must be of one kind; the controller reports
	// a policy mixing kinds as Invalid (as the reference implementation
	// does), so that check is not in the schema.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	TargetRefs []PolicyTargetReference `json:"targetRefs"`

	// Traffic holds the data-plane policies.
	// +optional
	Traffic *Traffic `json:"traffic,omitempty"`
}

// PolicyTargetReference names a Gateway or HTTPRoute in the policy's
// namespace, optionally one of its sections (listener or rule name).
type PolicyTargetReference struct {
	// Group is the target's API group.
	// +required
	// +kubebuilder:validation:Enum=gateway.networking.k8s.io
	Group gwv1.Group `json:"group"`
	// Kind is the target's kind.
	// +required
	// +kubebuilder:validation:Enum=HTTPRoute;Gateway
	Kind gwv1.Kind `json:"kind"`
	// Name is the target's name.
	// +required
	Name gwv1.ObjectName `json:"name"`
	// SectionName is a listener of a Gateway or a rule name of an HTTPRoute.
	// +optional
	SectionName *gwv1.SectionName `json:"sectionName,omitempty"`
}

// Traffic is the data-plane part of a policy.
type Traffic struct {
	// RateLimit limits requests or LLM tokens.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit holds the rate limits of a policy.
type RateLimit struct {
	// Local limits keep their counters in each proxy replica. Entries are
	// evaluated independently; a request must pass all of them.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Local []LocalRateLimit `json:"local,omitempty"`
	// Global limits keep their counters in an Envoy-compatible rate-limit
	// service (envoy.service.ratelimit.v3), shared by every replica.
	//
	// +optional
	Global *GlobalRateLimit `json:"global,omitempty"`
}

// GlobalRateLimit names the rate-limit service and the descriptors the
// proxy sends it for each request.
type GlobalRateLimit struct {
	// BackendRef is the rate-limit service: a Service and its gRPC port.
	//
	// +required
	// +kubebuilder:validation:XValidation:rule="(!has(self.group) || self.group == '') && (!has(self.kind) || self.kind == 'Service')",message="must be a core Service"
	// +kubebuilder:validation:XValidation:rule="has(self.port)",message="port is required"
	BackendRef gwv1.BackendObjectReference `json:"backendRef"`
	// Domain is the domain of the service's configuration the limits
	// belong to.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	Domain string `json:"domain"`
	// Descriptors are sent with every request they apply to; a request
	// must pass all of them.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Descriptors []GlobalRateLimitDescriptor `json:"descriptors"`
	// FailureMode is what a request gets when the service cannot answer in
	// time: FailClosed (the default) refuses it with 500, FailOpen lets it
	// through. Either way the trace says so.
	//
	// +optional
	// +kubebuilder:validation:Enum=FailClosed;FailOpen
	FailureMode *FailureMode `json:"failureMode,omitempty"`
}

// FailureMode is the behaviour of a global limit whose service is down.
type FailureMode string

// Failure modes.
const (
	FailClosed FailureMode = "FailClosed"
	FailOpen   FailureMode = "FailOpen"
)

// GlobalRateLimitDescriptor is one descriptor: entries computed from the
// request, what it counts, and optionally the limit the service applies.
type GlobalRateLimitDescriptor struct {
	// Entries are the descriptor's keys and values.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Entries []DescriptorEntry `json:"entries"`
	// Type is what the descriptor counts: Requests (the default), checked
	// and counted before the request is forwarded, or Tokens (LLM usage),
	// counted after the response.
	//
	// +optional
	// +kubebuilder:validation:Enum=Requests;Tokens
	Type *DescriptorType `json:"type,omitempty"`
	// Limit, when set, is the limit the service applies to the descriptor
	// instead of its own configuration.
	//
	// +optional
	Limit *GlobalLimit `json:"limit,omitempty"`
}

// DescriptorType is what a descriptor counts.
type DescriptorType string

// Descriptor types.
const (
	DescriptorRequests DescriptorType = "Requests"
	DescriptorTokens   DescriptorType = "Tokens"
)

// DescriptorEntry is one key of a descriptor and how its value is computed.
type DescriptorEntry struct {
	// Name is the descriptor key.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Expression is a CEL expression yielding the value, over the request
	// (request.method, request.path, request.headers["x-user"], ...) and
	// the client (source.address). A request for which it fails does not
	// send the descriptor.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	Expression string `json:"expression"`
}

// GlobalLimit is a limit override: Amount per Unit.
type GlobalLimit struct {
	// Amount is the requests (or tokens) allowed per unit.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	Amount int64 `json:"amount"`
	// Unit is the window, fixed and aligned to the clock by the service.
	//
	// +required
	// +kubebuilder:validation:Enum=Seconds;Minutes;Hours;Days
	Unit GlobalRateLimitUnit `json:"unit"`
}

// GlobalRateLimitUnit is the window of a global limit.
type GlobalRateLimitUnit string

// LocalRateLimit is one limit: Requests or Tokens per Unit, plus Burst.
//
// +kubebuilder:validation:XValidation:rule="has(self.requests) != has(self.tokens)",message="exactly one of requests or tokens must be set"
type LocalRateLimit struct {
	// Requests allowed per unit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Requests *int64 `json:"requests,omitempty"`
	// Tokens (LLM usage: prompt plus completion) allowed per unit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Tokens *int64 `json:"tokens,omitempty"`
	// Unit is the window of the limit.
	// +required
	Unit RateLimitUnit `json:"unit"`
	// Burst is allowed above the base limit: the bucket holds
	// requests+burst, and refills requests per unit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Burst *int64 `json:"burst,omitempty"`
	// Key is a CEL expression over the request (request.headers["x-api-key"],
	// source.address, ...) giving each key its own bucket; requests without
	// a key, or whose key fails to evaluate, share one bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key,omitempty"`
}

// RateLimitUnit is the window of a local limit.
//
// +kubebuilder:validation:Enum=Seconds;Minutes;Hours
type RateLimitUnit string

// Units of a local limit.
const (
	UnitSeconds RateLimitUnit = "Seconds"
	UnitMinutes RateLimitUnit = "Minutes"
	UnitHours   RateLimitUnit = "Hours"
)
