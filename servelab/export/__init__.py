"""Results that other tools read, and other tools' runs read in: each measured point as an
llm-d benchmark report validated against its schema (llmd, llmd_schema, llmd_export), and
`vllm bench serve` or AIPerf results as rows of a servelab table (importers, import_table).
Made from the tables and the store, with no engine running; the paper archive carries the reports."""
MAY_IMPORT = ("config", "engines", "serve", "search", "analysis")
