package grpcserver

// Admission reports the receive budget left and the streams waiting for it.
func (s *Server) Admission() (free, waiting int) {
	s.adm.mu.Lock()
	defer s.adm.mu.Unlock()
	return s.adm.free, len(s.adm.waiting)
}
