package tcp

import (
	"testing"

	"rdmasweep/node/transport/transporttest"
)

// The suite runs on loopback, where SendAuto writes from the mapping; the
// other two runs hold each way of sending to the same contract.
func TestConformance(t *testing.T) {
	transporttest.Run(t, New())
}

func TestConformanceSendfile(t *testing.T) {
	transporttest.Run(t, &Transport{Send: SendFile})
}

func TestConformanceWrite(t *testing.T) {
	transporttest.Run(t, &Transport{Send: SendWrite})
}
