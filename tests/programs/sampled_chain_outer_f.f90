! outer of sampled_chain_f.f90, in a file of its own so that it is not inlined.
subroutine outer(secs, sink)
  implicit none
  real(8), intent(in) :: secs
  integer(8), intent(inout) :: sink
  call inner(secs, sink)
  sink = sink + 1
end subroutine outer
