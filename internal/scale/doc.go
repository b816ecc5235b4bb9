// Package scale is the study of the coordination partition at scale
// (`make lab SCENARIO=scale`): fleets of hold-mode relays starting together
// on an empty table (Run), on the embedded DynamoDB server or on an
// in-memory model of the partition (model.go) checked against it
// (Validate), and a burst of wake-ups scaling the relay function out and
// back in on the Lambda emulator (RunBurst). Each runs only in a
// testing/synctest bubble, on lab.Sim, so a seed fixes every figure.
// docs/benchmarks.md, "The coordination partition at scale", states what
// runs for real, the model's limits and the burst's settings.
package scale
