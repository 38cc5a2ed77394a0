"""The HTTP plumbing every listener shares: bearer authentication (the public
one's, `auth`), reading a body within a limit (`bodies`), headers read one of
each (`headers`), what every answer carries (`responses`), the bounds on slow
or oversized clients (`slow_clients`), and for outbound requests the URLs
given on the command line (`urls`) and the proxy and certificate variables
(`environment`). Strict JSON decoding is `waypost.decoding`."""
