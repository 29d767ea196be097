package hint

import (
	"errors"
	"fmt"
	"testing"
)

type own struct{}

func (own) Error() string { return "own" }
func (own) Hint() string  { return "do the own thing" }

func TestOfFindsTheHintThroughWrapping(t *testing.T) {
	base := errors.New("base")
	err := fmt.Errorf("doing x: %w", Wrap(base, "try y"))
	if Of(err) != "try y" || !errors.Is(err, base) || err.Error() != "doing x: base" {
		t.Errorf("Of %q, Is %v, Error %q", Of(err), errors.Is(err, base), err.Error())
	}
	if Of(fmt.Errorf("z: %w", own{})) != "do the own thing" {
		t.Error("a package's own Hint() is not found")
	}
	if Of(base) != "" || Of(nil) != "" {
		t.Error("an error without a hint has one")
	}
}
