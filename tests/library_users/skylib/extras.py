from skylib import Profile


class WideProfile(Profile):
    scale: float
