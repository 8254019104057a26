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
}

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
