"""Several trainings compared, and the features most of them share kept (prisma_core.sae.consensus), on real BBC
headline embeddings."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from prisma_core.errors import TrainingError
from prisma_core.progress import Progress
from prisma_core.sae import SAEConfig
from prisma_core.sae.consensus import combine, training_seeds
from prisma_core.sae.initial import data_directions
from prisma_core.sae.model import TopKSAE
from prisma_core.sae.train import PassageRows, feature_codes, train_sae

CONFIG = SAEConfig(n_features=32, k=4, epochs=4, batch_size=64, n_trainings=3)


def test_each_training_gets_its_own_seed_and_runs_share_none() -> None:
    assert training_seeds(0, 3) == training_seeds(0, 3)
    assert len(set(training_seeds(0, 3))) == 3
    assert not set(training_seeds(0, 3)) & set(training_seeds(1, 3))
    assert training_seeds(0, 5)[:3] == training_seeds(0, 3)  # more trainings add seeds, they do not change them


def permuted(model: TopKSAE, order: np.ndarray) -> TopKSAE:
    """The same SAE with its latents listed in another order."""
    copy = TopKSAE(model.d, model.n_latents, model.k)
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name in ("W_enc", "b_enc", "W_dec"):
            getattr(copy, name).copy_(getattr(model, name).detach()[order.copy()])
    return copy


def firing_features(model: TopKSAE, x: np.ndarray) -> int:
    return int((np.diff(feature_codes(model, x).tocsc().indptr) > 0).sum())


def test_the_same_features_found_in_every_training_are_all_kept_with_their_weights(bbc_subset: np.ndarray) -> None:
    model = train_sae(bbc_subset, replace(CONFIG, n_trainings=1)).model
    firing = firing_features(model, bbc_subset)  # a latent that fires on no document matches nothing: not kept
    orders = [np.arange(32), np.random.default_rng(0).permutation(32), np.random.default_rng(1).permutation(32)]
    models = [permuted(model, order) for order in orders]
    combined, found_in = combine(models, [feature_codes(m, bbc_subset) for m in models], at_least=2, match_at=0.7, k=4)
    assert firing >= 28 and combined.n_latents == firing and found_in.tolist() == [3] * firing
    density = np.diff(feature_codes(combined, bbc_subset).tocsc().indptr)
    assert (np.diff(density) <= 0).all()  # densest first
    original = model.decoder_directions().numpy()
    kept = combined.decoder_directions().numpy()
    assert np.allclose(np.sort(np.abs(kept @ original.T).max(axis=1)), 1.0, atol=1e-5)
    x = torch.from_numpy(bbc_subset[:50])
    np.testing.assert_allclose(  # the mean of three equal weights, to float rounding
        np.sort(combined(x).latents.detach().numpy(), axis=1)[:, -CONFIG.k :],  # the k active ones
        np.sort(model(x).latents.detach().numpy(), axis=1)[:, -CONFIG.k :],
        rtol=1e-5,
        atol=1e-6,
    )


def test_features_found_in_one_training_only_are_left_out(bbc_subset: np.ndarray) -> None:
    first, second = (train_sae(bbc_subset, replace(CONFIG, n_trainings=1, seed=s)).model for s in (0, 1))
    models = [first, permuted(first, np.arange(32)[::-1].copy()), second]
    combined, found_in = combine(models, [feature_codes(m, bbc_subset) for m in models], at_least=2, match_at=0.7, k=4)
    firing = firing_features(first, bbc_subset)
    assert combined.n_latents == firing and set(found_in.tolist()) <= {2, 3}  # every firing one of the first is in two
    alone = TopKSAE(first.d, 32, first.k, generator=torch.Generator().manual_seed(2))  # random directions: shares none
    trio = [first, second, alone]
    few, few_found = combine(trio, [feature_codes(m, bbc_subset) for m in trio], 3, 0.7, 4)
    assert few.n_latents == 5 and set(few_found.tolist()) == {2}  # none in all three: k + 1 found in two fill in
    lonely = [alone, TopKSAE(first.d, 32, first.k, generator=torch.Generator().manual_seed(3))]
    with pytest.raises(TrainingError, match="Only 0 features came back in 2 or more of the 2 trainings"):
        combine(lonely, [feature_codes(m, bbc_subset) for m in lonely], 2, 0.7, 4)


def test_a_run_compares_its_trainings_and_records_the_count(bbc_subset: np.ndarray) -> None:
    result = train_sae(bbc_subset, CONFIG)
    assert result.metrics["n_trainings"] == 3 and result.metrics["features_trained"] == 32
    assert result.model.n_latents == result.metrics["features_kept"] == len(result.found_in) <= 32
    assert set(result.found_in.tolist()) <= {2, 3}
    assert {entry["training"] for entry in result.history} == {1, 2, 3, 4}  # the polish is the fourth part
    again = train_sae(bbc_subset, CONFIG)
    first, second = result.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert np.array_equal(result.found_in, again.found_in)


def test_one_training_keeps_every_feature(bbc_subset: np.ndarray) -> None:
    result = train_sae(bbc_subset, replace(CONFIG, n_trainings=1))
    assert result.model.n_latents == 32 and result.found_in.tolist() == [1] * 32


def test_data_directions_start_the_first_features_at_the_broadest_groups() -> None:
    """Two well separated groups of documents: the first nested group (2 features) starts at their two centres."""
    rng = np.random.default_rng(0)
    centres = np.eye(16, dtype=np.float32)[:2] * 5
    documents = np.concatenate([centre + rng.normal(0, 0.3, (100, 16)) for centre in centres]).astype(np.float32)
    directions = data_directions(documents, (2, 16), seed=0)
    assert directions.shape == (16, 16)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1.0, rtol=1e-5)
    assert sorted(np.abs(directions[:2, :2]).argmax(axis=1).tolist()) == [0, 1]
    assert np.array_equal(directions, data_directions(documents, (2, 16), seed=0))
    few = data_directions(documents[:10], (2, 16), seed=0)
    assert few.shape == (2 + 10, 16)  # no group asks for more centres than there are documents


def test_a_looser_match_keeps_at_least_the_features_a_strict_one_keeps(bbc_subset: np.ndarray) -> None:
    """Features of trainings at many active features share their documents with neighbours, so one concept
    correlates at 0.5-0.7 between trainings: matching at 0.5 keeps more of them (each still found in most)."""
    models = [train_sae(bbc_subset, replace(CONFIG, n_trainings=1, k=8, seed=s)).model for s in range(3)]
    codes = [feature_codes(model, bbc_subset) for model in models]
    strict, strict_found = combine(models, codes, at_least=2, match_at=0.7, k=4)
    loose, loose_found = combine(models, codes, at_least=2, match_at=0.5, k=4)
    assert loose.n_latents >= strict.n_latents
    assert (loose_found >= 2).all() and (strict_found >= 2).all()


def test_the_polish_fits_the_kept_features_at_k_without_moving_them(bbc_subset: np.ndarray) -> None:
    """The trainings learn at k_compared active features; the run's SAE describes each document by k of the
    features they agreed on, fitted together: less unexplained variance, the same directions."""
    settings = replace(CONFIG, k=8, k_compared=4, n_trainings=3, epochs=4)
    unpolished = train_sae(bbc_subset, replace(settings, polish_epochs=0))
    polished = train_sae(bbc_subset, settings)
    assert unpolished.model.k == polished.model.k == 8 and polished.config.k_compared == 4
    assert np.array_equal(unpolished.found_in, polished.found_in)
    assert polished.metrics["fvu_train"] < unpolished.metrics["fvu_train"]
    cosines = (polished.model.decoder_directions() * unpolished.model.decoder_directions()).sum(dim=1)
    assert cosines.min() > 0.9
    assert polished.metrics["steps"] == unpolished.metrics["steps"] + 3 * (540 // 64)


def test_trainings_run_at_once_give_the_weights_they_give_one_after_another(
    bbc_subset: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two cores the trainings run two at a time, each on one thread: the same seed gives the same weights as
    the trainings one after another on one thread (the suite runs with OMP_NUM_THREADS=1)."""
    threads = torch.get_num_threads()  # whatever tests before in this process left
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    alone = train_sae(bbc_subset, CONFIG)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    reports: list[Progress] = []
    together = train_sae(bbc_subset, CONFIG, progress=reports.append)
    first, second = alone.model.state_dict(), together.model.state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert reports[-1].done == reports[-1].total == together.metrics["steps"]
    assert torch.get_num_threads() == threads  # set back after the trainings


def test_passages_of_the_training_documents_train_beside_them(bbc_subset: np.ndarray) -> None:
    """Passages add rows, not steps: an epoch is as many rows as training documents. Passages of held-out documents
    and of documents of a single passage are never trained on."""
    rng = np.random.default_rng(0)
    owners = np.concatenate([[0, 1, 2], np.repeat(np.arange(3, len(bbc_subset)), 3)])  # 0, 1, 2: one passage each
    noisy = bbc_subset[owners] + rng.normal(0, 0.01, (len(owners), bbc_subset.shape[1])).astype(np.float32)
    passages = PassageRows(noisy, owners)
    alone = train_sae(bbc_subset, CONFIG)
    with_passages = train_sae(bbc_subset, CONFIG, passages=passages)
    train = np.setdiff1d(with_passages.train_index, [0, 1, 2])
    assert with_passages.metrics["passages_trained"] == 3 * len(train)
    assert with_passages.metrics["steps"] == alone.metrics["steps"]
    assert np.array_equal(with_passages.holdout_index, alone.holdout_index)
    held_out = np.isin(owners, with_passages.holdout_index)
    only_held_out = PassageRows(noisy[held_out], owners[held_out])
    assert train_sae(bbc_subset, CONFIG, passages=only_held_out).metrics["passages_trained"] == 0


def test_settings_recorded_before_the_polish_read_as_what_they_did() -> None:
    old = SAEConfig.from_dict({"n_features": 80, "k": 4, "n_trainings": 3, "epochs": 12})
    assert (old.k_compared, old.compared_k(), old.match_at, old.polish_epochs) == (4, 4, 0.7, 0)
    assert not old.passages and not old.broadest_one
    assert SAEConfig().broadest_one
    assert SAEConfig.from_dict(SAEConfig().to_dict()) == SAEConfig()
