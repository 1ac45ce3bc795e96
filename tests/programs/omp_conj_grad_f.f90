! An OpenMP parallel loop in a Fortran subroutine, as NPB's CG has in conj_grad:
! gfortran outlines the region as `conj_grad_._omp_fn.0` (the subroutine's symbol, then
! `._omp_fn.N`), which `--func` selects.
!
! Usage: omp_conj_grad_f [T [R]]   (defaults 2 5)
!
! Construction: R calls of conj_grad, each one parallel region of exactly T threads
! (num_threads(T); the program stops with status 1 if a team had fewer) running a static
! loop over a vector. Every thread of a team, the master included, calls the outlined
! function once per region.
!
! Expected with --func 'conj_grad_._omp_fn.0': R*T entries and R*T exits [T=2, R=5: 10].
program omp_conj_grad_f
  implicit none
  integer, parameter :: m = 100000
  integer :: t, r, k, team
  character(len=16) :: arg
  double precision :: x(m)
  t = 2
  r = 5
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) t
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) r
  end if
  x = 1.0d0
  do k = 1, r
    call conj_grad(x, m, t, team)
    if (team /= t) then
      print '(a,i0,a,i0)', 'omp_conj_grad_f: a team had ', team, ' threads, not ', t
      stop 1
    end if
  end do
  print '(a)', 'ok'
end program omp_conj_grad_f

! One parallel region of t threads; team: how many threads it had.
subroutine conj_grad(x, m, t, team)
  implicit none
  integer, intent(in) :: m, t
  double precision, intent(inout) :: x(m)
  integer, intent(out) :: team
  integer :: i
  team = 0
!$omp parallel num_threads(t) shared(x, team)
!$omp atomic
  team = team + 1
!$omp do schedule(static)
  do i = 1, m
    x(i) = x(i) * 1.000001d0 + 1.0d-9
  end do
!$omp end do
!$omp end parallel
end subroutine conj_grad
