package tcp

import (
	"testing"

	"rdmasweep/node/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, New())
}
