package modelrunner

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
)

// Errors a Provider returns, wrapped with the model and version they concern;
// test with errors.Is.
var (
	// ErrUnknownModel: no model of that name is served.
	ErrUnknownModel = errors.New("model not served")
	// ErrUnknownVersion: the model is served, but not at that version.
	ErrUnknownVersion = errors.New("model version not served")
	// ErrInputMismatch: the inputs do not match the model's signature
	// (wrapped by *InputError).
	ErrInputMismatch = errors.New("input does not match the model")
	// ErrUnsupportedOutput: an output was requested that Run cannot return
	// as a tensor (a map, a sequence of tensors, a sequence of maps whose
	// rows have different keys).
	ErrUnsupportedOutput = errors.New("output is not a tensor")
	// ErrClosed: the provider has shut down.
	ErrClosed = errors.New("model provider closed")
)

// InputError says which input of which model version was refused and why.
type InputError struct {
	Model   string
	Version int64
	Input   string
	Reason  string
}

// Error implements error.
func (e *InputError) Error() string {
	return fmt.Sprintf("model %q version %d: input %q: %s", e.Model, e.Version, e.Input, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInputMismatch) true.
func (e *InputError) Unwrap() error { return ErrInputMismatch }

// LookupError says why Lookup found no Provider under an extension ID.
type LookupError struct {
	ID component.ID
	// Missing is true when no extension has the ID, false when the
	// extension exists but does not serve models.
	Missing bool
}

// Error implements error.
func (e *LookupError) Error() string {
	if e.Missing {
		return fmt.Sprintf("extension %q not found: add it to service::extensions", e.ID)
	}
	return fmt.Sprintf("extension %q does not serve models (it is not a modelrunner.Provider)", e.ID)
}

// Lookup finds the Provider that the extension id implements among host's
// extensions, with a *LookupError when it is missing or of the wrong kind.
func Lookup(host component.Host, id component.ID) (Provider, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, &LookupError{ID: id, Missing: true}
	}
	p, ok := ext.(Provider)
	if !ok {
		return nil, &LookupError{ID: id}
	}
	return p, nil
}
