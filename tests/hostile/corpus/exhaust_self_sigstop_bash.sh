# attack: stop oneself (SIGSTOP) so that nothing ever finishes
# expect: the wall-clock timeout ends it; a stopped process is killed by the teardown
# status: timeout killed error
# limits: timeout=2
echo "CONTAINED: stopping myself" >&2
kill -STOP $$
echo "ESCAPE: resumed?" >&2
