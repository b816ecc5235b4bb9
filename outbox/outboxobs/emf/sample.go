package emf

// sample keeps a bounded, deterministic, evenly spaced subsample of a value
// stream: every value while fewer than max have arrived, then every
// stride-th value, where stride doubles each time the kept values would
// exceed max. The kept values are always exactly those whose arrival index
// is a multiple of stride, so the subsample is systematic (no bias towards
// early or late values) and the same stream always yields the same values.
// Memory stays at max values however long the invocation runs.
type sample struct {
	max    int
	stride int
	seen   int
	values []float64
}

func newSample(max int) sample { return sample{max: max, stride: 1} }

func (s *sample) add(v float64) {
	if s.seen%s.stride == 0 {
		s.values = append(s.values, v)
		if len(s.values) > s.max {
			// Keep the even positions: arrival indexes that are multiples
			// of the doubled stride.
			kept := s.values[:0]
			for i := 0; i < len(s.values); i += 2 {
				kept = append(kept, s.values[i])
			}
			s.values = kept
			s.stride *= 2
		}
	}
	s.seen++
}
