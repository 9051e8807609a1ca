"""Which configurations each round of a search tries."""
import itertools

from servelab.search import strategy

SPACE = {"max_num_seqs": [1, 2, 4, 8, 16], "max_num_batched_tokens": [256, 512, 1024, 2048]}


def goodput(config):
    """A landscape with one peak at max_num_seqs=8, max_num_batched_tokens=1024."""
    return 100 - 10 * abs(SPACE["max_num_seqs"].index(config["max_num_seqs"]) - 3) \
        - 7 * abs(SPACE["max_num_batched_tokens"].index(config["max_num_batched_tokens"]) - 2)


def search(strategy_name, budget, landscape=goodput, start=None):
    tried, rounds = [], []
    while True:
        configs, why = strategy.next_round(strategy_name, SPACE, tried, budget - len(tried), start=start)
        if not configs:
            return tried, rounds, why
        rounds.append(configs)
        tried += [(c, landscape(c)) for c in configs]


def test_round_zero_starts_in_the_middle_and_rounds_move_to_the_best_neighbour():
    tried, rounds, why = search("coordinate", budget=20)
    assert rounds[0] == [{"max_num_seqs": 4, "max_num_batched_tokens": 512}]
    assert rounds[1] == [{"max_num_seqs": 2, "max_num_batched_tokens": 512},
                         {"max_num_seqs": 8, "max_num_batched_tokens": 512},
                         {"max_num_seqs": 4, "max_num_batched_tokens": 256},
                         {"max_num_seqs": 4, "max_num_batched_tokens": 1024}]
    assert strategy.best(tried) == {"max_num_seqs": 8, "max_num_batched_tokens": 1024}
    assert why.startswith("converged")
    assert len(tried) < 20 * 0.6                        # far fewer launches than the grid's 20
    configs = [c for c, _ in tried]
    assert all(configs.count(c) == 1 for c in configs)  # no configuration launched twice


def test_the_budget_caps_launches_and_ends_the_search():
    tried, rounds, why = search("coordinate", budget=3)
    assert len(tried) == 3 and why == "the launch budget is spent"


def test_grid_tries_every_configuration_in_one_round():
    tried, rounds, why = search("grid", budget=20)
    assert len(rounds) == 1 and len(tried) == 20 and why == "the grid is complete"
    assert [c for c, _ in tried] == [dict(zip(SPACE, v)) for v in itertools.product(*SPACE.values())]


def test_a_given_start_and_a_space_where_nothing_meets_the_slo():
    tried, rounds, why = search("coordinate", budget=20, landscape=lambda c: 0.0,
                                start={"max_num_seqs": 1, "max_num_batched_tokens": 256})
    assert rounds[0] == [{"max_num_seqs": 1, "max_num_batched_tokens": 256}]
    assert len(rounds) == 2 and why.startswith("converged")   # ties keep the start: its neighbours, then stop
