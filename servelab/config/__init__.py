"""What the config means: `experiments` expands experiments into server and client points
(every stage builds on it, so it imports nothing from servelab); `checks` cross-checks
sections the JSON schema cannot; `validate` parses every command against the engines' own
parsers. The last two sit above the stages they ask, so they may import any of them."""
MAY_IMPORT = ("fetch", "engines", "serve", "analysis", "run")
BASE_MODULES = ("experiments",)  # import nothing from servelab: every stage may use them
